// Original file: proto/maka/broker/v1/broker.proto

import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../../google/protobuf/Duration';

export interface Registered {
  'registration_id'?: (string);
  'connection_id'?: (string);
  'heartbeat_interval'?: (_google_protobuf_Duration | null);
}

export interface Registered__Output {
  'registration_id': (string);
  'connection_id': (string);
  'heartbeat_interval': (_google_protobuf_Duration__Output | null);
}
