// Original file: proto/maka/form/v1/form.proto

import type { Option as _maka_form_v1_Option, Option__Output as _maka_form_v1_Option__Output } from '../../../maka/form/v1/Option';
import type { StringList as _maka_form_v1_StringList, StringList__Output as _maka_form_v1_StringList__Output } from '../../../maka/form/v1/StringList';

export interface MultiSelectField {
  'options'?: (_maka_form_v1_Option)[];
  'min_items'?: (number);
  'max_items'?: (number);
  'default_value'?: (_maka_form_v1_StringList | null);
  '_min_items'?: "min_items";
  '_max_items'?: "max_items";
  '_default_value'?: "default_value";
}

export interface MultiSelectField__Output {
  'options': (_maka_form_v1_Option__Output)[];
  'min_items'?: (number);
  'max_items'?: (number);
  'default_value'?: (_maka_form_v1_StringList__Output | null);
  '_min_items'?: "min_items";
  '_max_items'?: "max_items";
  '_default_value'?: "default_value";
}
