// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { InteractionEvent as _maka_interaction_v1_InteractionEvent, InteractionEvent__Output as _maka_interaction_v1_InteractionEvent__Output } from '../../../maka/interaction/v1/InteractionEvent';

export interface Event {
  'event'?: (_maka_interaction_v1_InteractionEvent | null);
  'resume_token'?: (string);
}

export interface Event__Output {
  'event': (_maka_interaction_v1_InteractionEvent__Output | null);
  'resume_token': (string);
}
