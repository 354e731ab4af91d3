// Original file: proto/maka/broker/v1/broker.proto


export interface CallLost {
  'reason'?: (string);
}

export interface CallLost__Output {
  'reason': (string);
}
