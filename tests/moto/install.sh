#!/usr/bin/env bash
# moto's server (the AWS emulator the EC2 tests run against), installed once
# from PyPI; prints the directory holding `moto_server`.
exec "$(dirname "${BASH_SOURCE[0]}")/../pip-tool/install.sh" moto 5.2.5 'moto[server]==5.2.5' moto_server
