// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface HeartbeatAck {
  'renewed'?: (number);
  'lease_deadline'?: (_google_protobuf_Timestamp | null);
}

export interface HeartbeatAck__Output {
  'renewed': (number);
  'lease_deadline': (_google_protobuf_Timestamp__Output | null);
}
