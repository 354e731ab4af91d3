// Original file: proto/maka/form/v1/form.proto


export interface BooleanField {
  'default_value'?: (boolean);
  '_default_value'?: "default_value";
}

export interface BooleanField__Output {
  'default_value'?: (boolean);
  '_default_value'?: "default_value";
}
