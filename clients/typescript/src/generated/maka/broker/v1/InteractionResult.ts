// Original file: proto/maka/broker/v1/broker.proto

import type { Answer as _maka_form_v1_Answer, Answer__Output as _maka_form_v1_Answer__Output } from '../../../maka/form/v1/Answer';
import type { CloseReason as _maka_interaction_v1_CloseReason, CloseReason__Output as _maka_interaction_v1_CloseReason__Output } from '../../../maka/interaction/v1/CloseReason';

export interface InteractionResult {
  'invocation_id'?: (string);
  'correlation_id'?: (string);
  'interaction_id'?: (string);
  'answer'?: (_maka_form_v1_Answer | null);
  'close_reason'?: (_maka_interaction_v1_CloseReason);
}

export interface InteractionResult__Output {
  'invocation_id': (string);
  'correlation_id': (string);
  'interaction_id': (string);
  'answer': (_maka_form_v1_Answer__Output | null);
  'close_reason': (_maka_interaction_v1_CloseReason__Output);
}
