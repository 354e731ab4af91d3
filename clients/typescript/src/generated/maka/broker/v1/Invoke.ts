// Original file: proto/maka/broker/v1/broker.proto

import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../../google/protobuf/Duration';

export interface Invoke {
  'invocation_id'?: (string);
  'tool_name'?: (string);
  'arguments_json'?: (string);
  'execution_timeout'?: (_google_protobuf_Duration | null);
}

export interface Invoke__Output {
  'invocation_id': (string);
  'tool_name': (string);
  'arguments_json': (string);
  'execution_timeout': (_google_protobuf_Duration__Output | null);
}
