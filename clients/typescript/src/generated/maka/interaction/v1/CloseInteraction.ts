// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { CloseReason as _maka_interaction_v1_CloseReason, CloseReason__Output as _maka_interaction_v1_CloseReason__Output } from '../../../maka/interaction/v1/CloseReason';

export interface CloseInteraction {
  'interaction_id'?: (string);
  'reason'?: (_maka_interaction_v1_CloseReason);
  'invocation_id'?: (string);
}

export interface CloseInteraction__Output {
  'interaction_id': (string);
  'reason': (_maka_interaction_v1_CloseReason__Output);
  'invocation_id': (string);
}
