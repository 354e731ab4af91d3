// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { ErrorReason as _maka_interaction_v1_ErrorReason, ErrorReason__Output as _maka_interaction_v1_ErrorReason__Output } from '../../../maka/interaction/v1/ErrorReason';
import type { FieldViolation as _maka_form_v1_FieldViolation, FieldViolation__Output as _maka_form_v1_FieldViolation__Output } from '../../../maka/form/v1/FieldViolation';

export interface OpenRejected {
  'request_ref'?: (string);
  'reason'?: (_maka_interaction_v1_ErrorReason);
  'message'?: (string);
  'violations'?: (_maka_form_v1_FieldViolation)[];
}

export interface OpenRejected__Output {
  'request_ref': (string);
  'reason': (_maka_interaction_v1_ErrorReason__Output);
  'message': (string);
  'violations': (_maka_form_v1_FieldViolation__Output)[];
}
