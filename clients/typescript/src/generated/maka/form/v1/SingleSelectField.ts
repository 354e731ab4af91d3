// Original file: proto/maka/form/v1/form.proto

import type { Option as _maka_form_v1_Option, Option__Output as _maka_form_v1_Option__Output } from '../../../maka/form/v1/Option';

export interface SingleSelectField {
  'options'?: (_maka_form_v1_Option)[];
  'default_value'?: (string);
  '_default_value'?: "default_value";
}

export interface SingleSelectField__Output {
  'options': (_maka_form_v1_Option__Output)[];
  'default_value'?: (string);
  '_default_value'?: "default_value";
}
