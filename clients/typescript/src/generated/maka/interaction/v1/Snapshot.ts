// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Interaction as _maka_interaction_v1_Interaction, Interaction__Output as _maka_interaction_v1_Interaction__Output } from '../../../maka/interaction/v1/Interaction';

export interface Snapshot {
  'pending'?: (_maka_interaction_v1_Interaction)[];
  'resume_token'?: (string);
}

export interface Snapshot__Output {
  'pending': (_maka_interaction_v1_Interaction__Output)[];
  'resume_token': (string);
}
