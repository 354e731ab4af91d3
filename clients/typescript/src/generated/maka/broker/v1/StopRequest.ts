// Original file: proto/maka/broker/v1/broker.proto


export interface StopRequest {
  'session_id'?: (string);
  'turn_id'?: (string);
  'all'?: (boolean);
  'invocation_id'?: (string);
}

export interface StopRequest__Output {
  'session_id': (string);
  'turn_id': (string);
  'all': (boolean);
  'invocation_id': (string);
}
