// Original file: proto/maka/form/v1/form.proto


export interface NumberField {
  'minimum'?: (number | string);
  'maximum'?: (number | string);
  'default_value'?: (number | string);
  '_minimum'?: "minimum";
  '_maximum'?: "maximum";
  '_default_value'?: "default_value";
}

export interface NumberField__Output {
  'minimum'?: (number);
  'maximum'?: (number);
  'default_value'?: (number);
  '_minimum'?: "minimum";
  '_maximum'?: "maximum";
  '_default_value'?: "default_value";
}
