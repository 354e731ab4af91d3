// Original file: proto/maka/broker/v1/broker.proto


export interface SignOutRequest {
  'server'?: (string);
}

export interface SignOutRequest__Output {
  'server': (string);
}
