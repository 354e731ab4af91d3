// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Interaction as _maka_interaction_v1_Interaction, Interaction__Output as _maka_interaction_v1_Interaction__Output } from '../../../maka/interaction/v1/Interaction';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface ListPendingResponse {
  'pending'?: (_maka_interaction_v1_Interaction)[];
  'as_of'?: (_google_protobuf_Timestamp | null);
}

export interface ListPendingResponse__Output {
  'pending': (_maka_interaction_v1_Interaction__Output)[];
  'as_of': (_google_protobuf_Timestamp__Output | null);
}
