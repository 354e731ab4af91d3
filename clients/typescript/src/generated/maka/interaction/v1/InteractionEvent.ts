// Original file: proto/maka/interaction/v1/interaction.proto

import type { EventKind as _maka_interaction_v1_EventKind, EventKind__Output as _maka_interaction_v1_EventKind__Output } from '../../../maka/interaction/v1/EventKind';
import type { Interaction as _maka_interaction_v1_Interaction, Interaction__Output as _maka_interaction_v1_Interaction__Output } from '../../../maka/interaction/v1/Interaction';

export interface InteractionEvent {
  'kind'?: (_maka_interaction_v1_EventKind);
  'interaction'?: (_maka_interaction_v1_Interaction | null);
}

export interface InteractionEvent__Output {
  'kind': (_maka_interaction_v1_EventKind__Output);
  'interaction': (_maka_interaction_v1_Interaction__Output | null);
}
