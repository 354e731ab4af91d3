// Original file: proto/maka/broker/v1/broker.proto


export interface StopResponse {
  'stopped_invocations'?: (number);
}

export interface StopResponse__Output {
  'stopped_invocations': (number);
}
