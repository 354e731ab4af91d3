// Original file: proto/maka/broker/v1/broker.proto

import type { ServerStatus as _maka_broker_v1_ServerStatus, ServerStatus__Output as _maka_broker_v1_ServerStatus__Output } from '../../../maka/broker/v1/ServerStatus';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';
import type { Long } from '@grpc/proto-loader';

export interface ReportServersRequest {
  'reporter_id'?: (string);
  'servers'?: (_maka_broker_v1_ServerStatus)[];
  'config_generation'?: (number | string | Long);
  'config_errors'?: (string)[];
  'config_changes'?: (string)[];
  'config_reload_time'?: (_google_protobuf_Timestamp | null);
}

export interface ReportServersRequest__Output {
  'reporter_id': (string);
  'servers': (_maka_broker_v1_ServerStatus__Output)[];
  'config_generation': (string);
  'config_errors': (string)[];
  'config_changes': (string)[];
  'config_reload_time': (_google_protobuf_Timestamp__Output | null);
}
