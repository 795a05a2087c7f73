Prints the ten digits and a newline
++++++++++                  cell 0: the counter (10)
>++++++[>++++++++<-]>       cell 2: 6 * 8 = 48 = '0'
<<[>>.+<<-]                 print cell 2 and increment it; ten times
++++++++++.                 cell 0 is 0 again: make it 10 (newline) and print it
