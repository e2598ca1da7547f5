module capwasm.dev/controlplane/parentwatch

go 1.24
