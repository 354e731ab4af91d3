// Original file: proto/maka/broker/v1/broker.proto


export interface InteractionReceived {
  'invocation_id'?: (string);
  'correlation_id'?: (string);
  'interaction_id'?: (string);
}

export interface InteractionReceived__Output {
  'invocation_id': (string);
  'correlation_id': (string);
  'interaction_id': (string);
}
