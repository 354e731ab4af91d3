// Original file: proto/maka/form/v1/form.proto

import type { FormErrorReason as _maka_form_v1_FormErrorReason, FormErrorReason__Output as _maka_form_v1_FormErrorReason__Output } from '../../../maka/form/v1/FormErrorReason';

export interface FieldViolation {
  'path'?: (string);
  'reason'?: (_maka_form_v1_FormErrorReason);
  'description'?: (string);
}

export interface FieldViolation__Output {
  'path': (string);
  'reason': (_maka_form_v1_FormErrorReason__Output);
  'description': (string);
}
