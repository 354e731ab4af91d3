// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { ErrorReason as _maka_interaction_v1_ErrorReason, ErrorReason__Output as _maka_interaction_v1_ErrorReason__Output } from '../../../maka/interaction/v1/ErrorReason';
import type { FieldViolation as _maka_form_v1_FieldViolation, FieldViolation__Output as _maka_form_v1_FieldViolation__Output } from '../../../maka/form/v1/FieldViolation';
import type { Interaction as _maka_interaction_v1_Interaction, Interaction__Output as _maka_interaction_v1_Interaction__Output } from '../../../maka/interaction/v1/Interaction';

export interface AnswerOutcome {
  'submission_id'?: (string);
  'accepted'?: (boolean);
  'reason'?: (_maka_interaction_v1_ErrorReason);
  'message'?: (string);
  'violations'?: (_maka_form_v1_FieldViolation)[];
  'interaction'?: (_maka_interaction_v1_Interaction | null);
}

export interface AnswerOutcome__Output {
  'submission_id': (string);
  'accepted': (boolean);
  'reason': (_maka_interaction_v1_ErrorReason__Output);
  'message': (string);
  'violations': (_maka_form_v1_FieldViolation__Output)[];
  'interaction': (_maka_interaction_v1_Interaction__Output | null);
}
