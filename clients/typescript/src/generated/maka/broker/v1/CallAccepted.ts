// Original file: proto/maka/broker/v1/broker.proto


export interface CallAccepted {
  'invocation_id'?: (string);
  'provider_id'?: (string);
  'host_id'?: (string);
  'host_address'?: (string);
}

export interface CallAccepted__Output {
  'invocation_id': (string);
  'provider_id': (string);
  'host_id': (string);
  'host_address': (string);
}
