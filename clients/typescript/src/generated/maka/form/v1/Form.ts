// Original file: proto/maka/form/v1/form.proto

import type { Field as _maka_form_v1_Field, Field__Output as _maka_form_v1_Field__Output } from '../../../maka/form/v1/Field';
import type { Requester as _maka_form_v1_Requester, Requester__Output as _maka_form_v1_Requester__Output } from '../../../maka/form/v1/Requester';

export interface Form {
  'message'?: (string);
  'fields'?: (_maka_form_v1_Field)[];
  'requester'?: (_maka_form_v1_Requester | null);
}

export interface Form__Output {
  'message': (string);
  'fields': (_maka_form_v1_Field__Output)[];
  'requester': (_maka_form_v1_Requester__Output | null);
}
