Shifts every input byte up by one until the input ends (at the end the cell stays 0)
,[+.[-],]
