// Original file: proto/maka/broker/v1/broker.proto

import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface AwaitingInteraction {
  'interaction_id'?: (string);
  'message'?: (string);
  'field_count'?: (number);
  'expires_at'?: (_google_protobuf_Timestamp | null);
}

export interface AwaitingInteraction__Output {
  'interaction_id': (string);
  'message': (string);
  'field_count': (number);
  'expires_at': (_google_protobuf_Timestamp__Output | null);
}
