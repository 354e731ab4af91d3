// Original file: proto/maka/broker/v1/broker.proto


export interface CallAccepted {
  'invocation_id'?: (string);
  'provider_id'?: (string);
}

export interface CallAccepted__Output {
  'invocation_id': (string);
  'provider_id': (string);
}
