// Original file: proto/maka/broker/v1/broker.proto

import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';
import type { Long } from '@grpc/proto-loader';

export interface ReporterStatus {
  'reporter_id'?: (string);
  'config_generation'?: (number | string | Long);
  'config_errors'?: (string)[];
  'config_changes'?: (string)[];
  'report_time'?: (_google_protobuf_Timestamp | null);
  'config_reload_time'?: (_google_protobuf_Timestamp | null);
}

export interface ReporterStatus__Output {
  'reporter_id': (string);
  'config_generation': (string);
  'config_errors': (string)[];
  'config_changes': (string)[];
  'report_time': (_google_protobuf_Timestamp__Output | null);
  'config_reload_time': (_google_protobuf_Timestamp__Output | null);
}
