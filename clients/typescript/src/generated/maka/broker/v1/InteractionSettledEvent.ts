// Original file: proto/maka/broker/v1/broker.proto

import type { Action as _maka_form_v1_Action, Action__Output as _maka_form_v1_Action__Output } from '../../../maka/form/v1/Action';
import type { CloseReason as _maka_interaction_v1_CloseReason, CloseReason__Output as _maka_interaction_v1_CloseReason__Output } from '../../../maka/interaction/v1/CloseReason';

export interface InteractionSettledEvent {
  'interaction_id'?: (string);
  'action'?: (_maka_form_v1_Action);
  'close_reason'?: (_maka_interaction_v1_CloseReason);
}

export interface InteractionSettledEvent__Output {
  'interaction_id': (string);
  'action': (_maka_form_v1_Action__Output);
  'close_reason': (_maka_interaction_v1_CloseReason__Output);
}
