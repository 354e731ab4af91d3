// Original file: proto/maka/interaction/v1/interaction.proto


export interface Person {
  'principal'?: (string);
  'issuer'?: (string);
  'via'?: (string);
}

export interface Person__Output {
  'principal': (string);
  'issuer': (string);
  'via': (string);
}
