from . import (
    CLIENT as CLIENT,
    COMMAND as COMMAND,
    CR as CR,
    ER as ER,
    FIELD_TYPE as FIELD_TYPE,
    FLAG as FLAG,
    SERVER_STATUS as SERVER_STATUS,
)
