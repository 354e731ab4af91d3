// Original file: proto/maka/form/v1/form.proto


export interface Option {
  'value'?: (string);
  'label'?: (string);
}

export interface Option__Output {
  'value': (string);
  'label': (string);
}
