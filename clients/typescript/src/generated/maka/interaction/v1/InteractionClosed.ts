// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Interaction as _maka_interaction_v1_Interaction, Interaction__Output as _maka_interaction_v1_Interaction__Output } from '../../../maka/interaction/v1/Interaction';

export interface InteractionClosed {
  'interaction_id'?: (string);
  'changed'?: (boolean);
  'interaction'?: (_maka_interaction_v1_Interaction | null);
  'invocation_id'?: (string);
}

export interface InteractionClosed__Output {
  'interaction_id': (string);
  'changed': (boolean);
  'interaction': (_maka_interaction_v1_Interaction__Output | null);
  'invocation_id': (string);
}
