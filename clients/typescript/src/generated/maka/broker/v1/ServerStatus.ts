// Original file: proto/maka/broker/v1/broker.proto

import type { ServerState as _maka_broker_v1_ServerState, ServerState__Output as _maka_broker_v1_ServerState__Output } from '../../../maka/broker/v1/ServerState';
import type { ServerError as _maka_broker_v1_ServerError, ServerError__Output as _maka_broker_v1_ServerError__Output } from '../../../maka/broker/v1/ServerError';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';
import type { Long } from '@grpc/proto-loader';

export interface ServerStatus {
  'name'?: (string);
  'state'?: (_maka_broker_v1_ServerState);
  'transport'?: (string);
  'era'?: (string);
  'protocol_version'?: (string);
  'tool_count'?: (number);
  'last_error'?: (_maka_broker_v1_ServerError | null);
  'next_retry_time'?: (_google_protobuf_Timestamp | null);
  'state_time'?: (_google_protobuf_Timestamp | null);
  'failures'?: (number);
  'connection_generation'?: (number | string | Long);
  'live_calls'?: (number);
}

export interface ServerStatus__Output {
  'name': (string);
  'state': (_maka_broker_v1_ServerState__Output);
  'transport': (string);
  'era': (string);
  'protocol_version': (string);
  'tool_count': (number);
  'last_error': (_maka_broker_v1_ServerError__Output | null);
  'next_retry_time': (_google_protobuf_Timestamp__Output | null);
  'state_time': (_google_protobuf_Timestamp__Output | null);
  'failures': (number);
  'connection_generation': (string);
  'live_calls': (number);
}
