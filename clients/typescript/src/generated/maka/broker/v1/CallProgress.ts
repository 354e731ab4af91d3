// Original file: proto/maka/broker/v1/broker.proto


export interface CallProgress {
  'progress'?: (number | string);
  'total'?: (number | string);
  'message'?: (string);
  '_total'?: "total";
}

export interface CallProgress__Output {
  'progress': (number);
  'total'?: (number);
  'message': (string);
  '_total'?: "total";
}
