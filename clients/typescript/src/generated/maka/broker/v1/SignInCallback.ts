// Original file: proto/maka/broker/v1/broker.proto


export interface SignInCallback {
  'server'?: (string);
  'code'?: (string);
  'state'?: (string);
  'iss'?: (string);
  'error'?: (string);
}

export interface SignInCallback__Output {
  'server': (string);
  'code': (string);
  'state': (string);
  'iss': (string);
  'error': (string);
}
