// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface AttachedSurface {
  'principal'?: (string);
  'kind'?: (string);
  'session_ids'?: (string)[];
  'all_sessions'?: (boolean);
  'session_count'?: (number);
  'attached_at'?: (_google_protobuf_Timestamp | null);
  'host_id'?: (string);
  'replica_id'?: (string);
}

export interface AttachedSurface__Output {
  'principal': (string);
  'kind': (string);
  'session_ids': (string)[];
  'all_sessions': (boolean);
  'session_count': (number);
  'attached_at': (_google_protobuf_Timestamp__Output | null);
  'host_id': (string);
  'replica_id': (string);
}
