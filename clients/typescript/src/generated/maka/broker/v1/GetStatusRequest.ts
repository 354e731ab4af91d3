// Original file: proto/maka/broker/v1/broker.proto


export interface GetStatusRequest {
}

export interface GetStatusRequest__Output {
}
