// Original file: proto/maka/form/v1/form.proto

import type { StringList as _maka_form_v1_StringList, StringList__Output as _maka_form_v1_StringList__Output } from '../../../maka/form/v1/StringList';
import type { Long } from '@grpc/proto-loader';

export interface Value {
  'string_value'?: (string);
  'number_value'?: (number | string);
  'integer_value'?: (number | string | Long);
  'boolean_value'?: (boolean);
  'string_list_value'?: (_maka_form_v1_StringList | null);
  'kind'?: "string_value"|"number_value"|"integer_value"|"boolean_value"|"string_list_value";
}

export interface Value__Output {
  'string_value'?: (string);
  'number_value'?: (number);
  'integer_value'?: (string);
  'boolean_value'?: (boolean);
  'string_list_value'?: (_maka_form_v1_StringList__Output | null);
  'kind'?: "string_value"|"number_value"|"integer_value"|"boolean_value"|"string_list_value";
}
