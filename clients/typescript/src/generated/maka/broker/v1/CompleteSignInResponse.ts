// Original file: proto/maka/broker/v1/broker.proto


export interface CompleteSignInResponse {
  'server'?: (string);
}

export interface CompleteSignInResponse__Output {
  'server': (string);
}
