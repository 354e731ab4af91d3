// Original file: proto/maka/broker/v1/broker.proto


export interface ListToolsRequest {
}

export interface ListToolsRequest__Output {
}
