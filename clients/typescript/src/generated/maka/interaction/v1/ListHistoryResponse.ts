// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { HistoryEntry as _maka_interaction_v1_HistoryEntry, HistoryEntry__Output as _maka_interaction_v1_HistoryEntry__Output } from '../../../maka/interaction/v1/HistoryEntry';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface ListHistoryResponse {
  'entries'?: (_maka_interaction_v1_HistoryEntry)[];
  'next_page_token'?: (string);
  'as_of'?: (_google_protobuf_Timestamp | null);
}

export interface ListHistoryResponse__Output {
  'entries': (_maka_interaction_v1_HistoryEntry__Output)[];
  'next_page_token': (string);
  'as_of': (_google_protobuf_Timestamp__Output | null);
}
