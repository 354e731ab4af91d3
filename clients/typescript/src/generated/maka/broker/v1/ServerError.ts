// Original file: proto/maka/broker/v1/broker.proto

import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface ServerError {
  'summary'?: (string);
  'causes'?: (string)[];
  'http_status'?: (number);
  'stderr_tail'?: (string)[];
  'time'?: (_google_protobuf_Timestamp | null);
}

export interface ServerError__Output {
  'summary': (string);
  'causes': (string)[];
  'http_status': (number);
  'stderr_tail': (string)[];
  'time': (_google_protobuf_Timestamp__Output | null);
}
