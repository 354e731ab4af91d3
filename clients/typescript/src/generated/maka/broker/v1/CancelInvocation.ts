// Original file: proto/maka/broker/v1/broker.proto


export interface CancelInvocation {
  'invocation_id'?: (string);
  'reason'?: (string);
}

export interface CancelInvocation__Output {
  'invocation_id': (string);
  'reason': (string);
}
