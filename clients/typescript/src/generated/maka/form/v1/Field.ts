// Original file: proto/maka/form/v1/form.proto

import type { StringField as _maka_form_v1_StringField, StringField__Output as _maka_form_v1_StringField__Output } from '../../../maka/form/v1/StringField';
import type { NumberField as _maka_form_v1_NumberField, NumberField__Output as _maka_form_v1_NumberField__Output } from '../../../maka/form/v1/NumberField';
import type { BooleanField as _maka_form_v1_BooleanField, BooleanField__Output as _maka_form_v1_BooleanField__Output } from '../../../maka/form/v1/BooleanField';
import type { SingleSelectField as _maka_form_v1_SingleSelectField, SingleSelectField__Output as _maka_form_v1_SingleSelectField__Output } from '../../../maka/form/v1/SingleSelectField';
import type { MultiSelectField as _maka_form_v1_MultiSelectField, MultiSelectField__Output as _maka_form_v1_MultiSelectField__Output } from '../../../maka/form/v1/MultiSelectField';

export interface Field {
  'name'?: (string);
  'label'?: (string);
  'description'?: (string);
  'required'?: (boolean);
  'string'?: (_maka_form_v1_StringField | null);
  'number'?: (_maka_form_v1_NumberField | null);
  'integer'?: (_maka_form_v1_NumberField | null);
  'boolean'?: (_maka_form_v1_BooleanField | null);
  'single_select'?: (_maka_form_v1_SingleSelectField | null);
  'multi_select'?: (_maka_form_v1_MultiSelectField | null);
  'kind'?: "string"|"number"|"integer"|"boolean"|"single_select"|"multi_select";
}

export interface Field__Output {
  'name': (string);
  'label': (string);
  'description': (string);
  'required': (boolean);
  'string'?: (_maka_form_v1_StringField__Output | null);
  'number'?: (_maka_form_v1_NumberField__Output | null);
  'integer'?: (_maka_form_v1_NumberField__Output | null);
  'boolean'?: (_maka_form_v1_BooleanField__Output | null);
  'single_select'?: (_maka_form_v1_SingleSelectField__Output | null);
  'multi_select'?: (_maka_form_v1_MultiSelectField__Output | null);
  'kind'?: "string"|"number"|"integer"|"boolean"|"single_select"|"multi_select";
}
