// Original file: proto/maka/broker/v1/broker.proto


export interface CompleteSignInRequest {
  'code'?: (string);
  'state'?: (string);
  'iss'?: (string);
  'error'?: (string);
}

export interface CompleteSignInRequest__Output {
  'code': (string);
  'state': (string);
  'iss': (string);
  'error': (string);
}
