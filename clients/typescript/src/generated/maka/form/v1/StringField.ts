// Original file: proto/maka/form/v1/form.proto

import type { StringFormat as _maka_form_v1_StringFormat, StringFormat__Output as _maka_form_v1_StringFormat__Output } from '../../../maka/form/v1/StringFormat';

export interface StringField {
  'min_length'?: (number);
  'max_length'?: (number);
  'format'?: (_maka_form_v1_StringFormat);
  'default_value'?: (string);
  '_min_length'?: "min_length";
  '_max_length'?: "max_length";
  '_default_value'?: "default_value";
}

export interface StringField__Output {
  'min_length'?: (number);
  'max_length'?: (number);
  'format': (_maka_form_v1_StringFormat__Output);
  'default_value'?: (string);
  '_min_length'?: "min_length";
  '_max_length'?: "max_length";
  '_default_value'?: "default_value";
}
