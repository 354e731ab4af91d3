// Original file: proto/maka/broker/v1/broker.proto


export interface WatchToolsRequest {
}

export interface WatchToolsRequest__Output {
}
