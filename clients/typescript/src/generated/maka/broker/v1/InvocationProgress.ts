// Original file: proto/maka/broker/v1/broker.proto


export interface InvocationProgress {
  'invocation_id'?: (string);
  'progress'?: (number | string);
  'total'?: (number | string);
  'message'?: (string);
  '_total'?: "total";
}

export interface InvocationProgress__Output {
  'invocation_id': (string);
  'progress': (number);
  'total'?: (number);
  'message': (string);
  '_total'?: "total";
}
