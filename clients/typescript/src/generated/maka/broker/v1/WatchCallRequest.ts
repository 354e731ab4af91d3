// Original file: proto/maka/broker/v1/broker.proto


export interface WatchCallRequest {
  'invocation_id'?: (string);
  'resume_token'?: (string);
}

export interface WatchCallRequest__Output {
  'invocation_id': (string);
  'resume_token': (string);
}
