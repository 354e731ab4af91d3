// Original file: proto/maka/broker/v1/broker.proto

import type { FailureCode as _maka_broker_v1_FailureCode, FailureCode__Output as _maka_broker_v1_FailureCode__Output } from '../../../maka/broker/v1/FailureCode';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface CallSummary {
  'invocation_id'?: (string);
  'session_id'?: (string);
  'turn_id'?: (string);
  'tool_name'?: (string);
  'state'?: (string);
  'failure_code'?: (_maka_broker_v1_FailureCode);
  'is_error'?: (boolean);
  'interaction_ids'?: (string)[];
  'start_time'?: (_google_protobuf_Timestamp | null);
  'end_time'?: (_google_protobuf_Timestamp | null);
}

export interface CallSummary__Output {
  'invocation_id': (string);
  'session_id': (string);
  'turn_id': (string);
  'tool_name': (string);
  'state': (string);
  'failure_code': (_maka_broker_v1_FailureCode__Output);
  'is_error': (boolean);
  'interaction_ids': (string)[];
  'start_time': (_google_protobuf_Timestamp__Output | null);
  'end_time': (_google_protobuf_Timestamp__Output | null);
}
